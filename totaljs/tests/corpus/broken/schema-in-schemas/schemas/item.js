NEWSCHEMA('@Item', '*name:String, price:Number');
